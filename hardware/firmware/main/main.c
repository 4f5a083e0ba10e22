/*
 * Ampel lamp, ESP32-C6 board glue: Wi-Fi station, esp-mqtt subscription, LEDs.
 *
 * Everything that decides what the lamp shows lives in the Swift lamp logic
 * (ampel_lamp.h); this file only moves bytes in and lights out:
 *   - MQTT connected/disconnected -> ampel_lamp_link()
 *   - every whole message on a subscribed topic -> ampel_lamp_message()
 *   - every 20 ms -> ampel_lamp_tick(), then ampel_lamp_frame() onto the LEDs
 * Settings come from `idf.py menuconfig` -> "Ampel lamp" (Kconfig.projbuild).
 */
#include <stdlib.h>
#include <string.h>

#include "esp_event.h"
#include "esp_log.h"
#include "esp_netif.h"
#include "esp_random.h"
#include "esp_timer.h"
#include "esp_wifi.h"
#include "freertos/FreeRTOS.h"
#include "freertos/semphr.h"
#include "freertos/task.h"
#include "mqtt_client.h"
#include "nvs_flash.h"

#if CONFIG_AMPEL_LEDS_GPIO
#include "driver/gpio.h"
#else
#include "led_strip.h"
#endif

#include "ampel_lamp.h"

static const char *TAG = "ampel";

/* The MQTT task and the LED task both call into the lamp logic: one lock for both. */
static SemaphoreHandle_t lamp_lock;
static esp_mqtt_client_handle_t mqtt;

static uint64_t now_ms(void) { return (uint64_t)(esp_timer_get_time() / 1000); }

/* Embedded Swift seeds its hashing with random bytes; newlib may not provide this. */
__attribute__((weak)) void arc4random_buf(void *buffer, size_t length) {
    esp_fill_random(buffer, length);
}

/* ---- LEDs ---------------------------------------------------------------------------- */

#if CONFIG_AMPEL_LEDS_GPIO
static const int light_pins[4] = {
    CONFIG_AMPEL_GPIO_RED, CONFIG_AMPEL_GPIO_YELLOW, CONFIG_AMPEL_GPIO_GREEN, CONFIG_AMPEL_GPIO_BLUE,
};

static void leds_init(void) {
    for (int i = 0; i < 4; i++) {
        gpio_reset_pin(light_pins[i]);
        gpio_set_direction(light_pins[i], GPIO_MODE_OUTPUT);
        gpio_set_level(light_pins[i], 0);
    }
}

static void leds_show(uint8_t lit, uint32_t rgb) {
    (void)rgb;
    for (int i = 0; i < 4; i++) gpio_set_level(light_pins[i], (lit >> i) & 1);
}
#else
static led_strip_handle_t strip;

static void leds_init(void) {
    led_strip_config_t strip_config = {
        .strip_gpio_num = CONFIG_AMPEL_WS2812_GPIO,
        .max_leds = CONFIG_AMPEL_WS2812_COUNT,
        .led_model = LED_MODEL_WS2812,
    };
    led_strip_rmt_config_t rmt_config = {
        .resolution_hz = 10 * 1000 * 1000,
    };
    ESP_ERROR_CHECK(led_strip_new_rmt_device(&strip_config, &rmt_config, &strip));
    led_strip_clear(strip);
}

static void leds_show(uint8_t lit, uint32_t rgb) {
    (void)lit;
    /* Scale down: a ring at full white draws ~60 mA per pixel and blinds at a door. */
    uint32_t scale = CONFIG_AMPEL_WS2812_BRIGHTNESS;
    uint32_t r = ((rgb >> 16) & 0xFF) * scale / 255;
    uint32_t g = ((rgb >> 8) & 0xFF) * scale / 255;
    uint32_t b = (rgb & 0xFF) * scale / 255;
    for (int i = 0; i < CONFIG_AMPEL_WS2812_COUNT; i++) led_strip_set_pixel(strip, i, r, g, b);
    led_strip_refresh(strip);
}
#endif

static void led_task(void *arg) {
    (void)arg;
    int last_pattern = -2;
    int last_lit = -1;
    for (;;) {
        uint64_t now = now_ms();
        xSemaphoreTake(lamp_lock, portMAX_DELAY);
        int32_t pattern = ampel_lamp_tick(now);
        uint8_t lit = ampel_lamp_frame(now);
        uint32_t rgb = ampel_lamp_frame_rgb(now);
        xSemaphoreGive(lamp_lock);
        if (pattern != last_pattern) {
            ESP_LOGI(TAG, "pattern %d", (int)pattern);
            last_pattern = pattern;
        }
        if (lit != last_lit) {
            leds_show(lit, rgb);
            last_lit = lit;
        }
        vTaskDelay(pdMS_TO_TICKS(20));
    }
}

/* ---- MQTT ---------------------------------------------------------------------------- */

static void mqtt_event(void *arg, esp_event_base_t base, int32_t id, void *data) {
    (void)arg;
    (void)base;
    esp_mqtt_event_handle_t event = data;
    switch ((esp_mqtt_event_id_t)id) {
    case MQTT_EVENT_CONNECTED: {
        xSemaphoreTake(lamp_lock, portMAX_DELAY);
        size_t count = ampel_lamp_topic_count();
        uint8_t topic[160];
        for (size_t i = 0; i < count; i++) {
            if (ampel_lamp_topic(i, topic, sizeof topic) > 0) {
                esp_mqtt_client_subscribe(event->client, (const char *)topic, 1);
                ESP_LOGI(TAG, "subscribed %s", (const char *)topic);
            } else {
                ESP_LOGE(TAG, "topic %u longer than %u bytes; shorten the id or base", (unsigned)i,
                         (unsigned)sizeof topic - 1);
            }
        }
        ampel_lamp_link(true);
        xSemaphoreGive(lamp_lock);
        break;
    }
    case MQTT_EVENT_DISCONNECTED:
        xSemaphoreTake(lamp_lock, portMAX_DELAY);
        ampel_lamp_link(false);
        xSemaphoreGive(lamp_lock);
        break;
    case MQTT_EVENT_DATA:
        /* Only whole messages: a chunked one (larger than the buffer) is dropped, which the
         * lamp treats like any other message it cannot read. */
        if (event->current_data_offset == 0 && event->data_len == event->total_data_len) {
            xSemaphoreTake(lamp_lock, portMAX_DELAY);
            ampel_lamp_message((const uint8_t *)event->topic, (size_t)event->topic_len,
                               (const uint8_t *)event->data, (size_t)event->data_len);
            xSemaphoreGive(lamp_lock);
        }
        break;
    default:
        break;
    }
}

static void mqtt_start(void) {
    if (mqtt != NULL) return;
    esp_mqtt_client_config_t config = {
        .broker.address.uri = CONFIG_AMPEL_BROKER_URI,
        .credentials.username = strlen(CONFIG_AMPEL_BROKER_USERNAME) ? CONFIG_AMPEL_BROKER_USERNAME : NULL,
        .credentials.authentication.password =
            strlen(CONFIG_AMPEL_BROKER_PASSWORD) ? CONFIG_AMPEL_BROKER_PASSWORD : NULL,
        .buffer.size = 4096, /* the device state fits, with its rule texts too (outputs.texts_in_state) */
    };
    mqtt = esp_mqtt_client_init(&config);
    esp_mqtt_client_register_event(mqtt, ESP_EVENT_ANY_ID, mqtt_event, NULL);
    esp_mqtt_client_start(mqtt);
}

/* ---- Wi-Fi --------------------------------------------------------------------------- */

static void wifi_event(void *arg, esp_event_base_t base, int32_t id, void *data) {
    (void)arg;
    (void)data;
    if (base == WIFI_EVENT && (id == WIFI_EVENT_STA_START || id == WIFI_EVENT_STA_DISCONNECTED)) {
        esp_wifi_connect(); /* esp-mqtt reconnects by itself once the network is back */
    } else if (base == IP_EVENT && id == IP_EVENT_STA_GOT_IP) {
        mqtt_start();
    }
}

static void wifi_start(void) {
    ESP_ERROR_CHECK(esp_netif_init());
    ESP_ERROR_CHECK(esp_event_loop_create_default());
    esp_netif_create_default_wifi_sta();
    wifi_init_config_t init = WIFI_INIT_CONFIG_DEFAULT();
    ESP_ERROR_CHECK(esp_wifi_init(&init));
    ESP_ERROR_CHECK(esp_event_handler_register(WIFI_EVENT, ESP_EVENT_ANY_ID, wifi_event, NULL));
    ESP_ERROR_CHECK(esp_event_handler_register(IP_EVENT, IP_EVENT_STA_GOT_IP, wifi_event, NULL));
    wifi_config_t config = {0};
    strncpy((char *)config.sta.ssid, CONFIG_AMPEL_WIFI_SSID, sizeof config.sta.ssid);
    strncpy((char *)config.sta.password, CONFIG_AMPEL_WIFI_PASSWORD, sizeof config.sta.password);
    ESP_ERROR_CHECK(esp_wifi_set_mode(WIFI_MODE_STA));
    ESP_ERROR_CHECK(esp_wifi_set_config(WIFI_IF_STA, &config));
    ESP_ERROR_CHECK(esp_wifi_start());
}

void app_main(void) {
    esp_err_t err = nvs_flash_init();
    if (err == ESP_ERR_NVS_NO_FREE_PAGES || err == ESP_ERR_NVS_NEW_VERSION_FOUND) {
        ESP_ERROR_CHECK(nvs_flash_erase());
        err = nvs_flash_init();
    }
    ESP_ERROR_CHECK(err);

    lamp_lock = xSemaphoreCreateMutex();
#if CONFIG_AMPEL_FOLLOW_DEVICE
    const int32_t follow = AMPEL_FOLLOW_DEVICE;
#else
    const int32_t follow = AMPEL_FOLLOW_DISTRICT;
#endif
    const char *id = CONFIG_AMPEL_FOLLOW_ID;
    const char *base = CONFIG_AMPEL_BASE_TOPIC;
    if (!ampel_lamp_configure(follow, (const uint8_t *)id, strlen(id), (const uint8_t *)base, strlen(base))) {
        ESP_LOGE(TAG, "invalid AMPEL_FOLLOW_ID or AMPEL_BASE_TOPIC; fix them in menuconfig");
        abort();
    }

    leds_init();
    ampel_lamp_power_on(now_ms()); /* lamp test, then "no signal" until Ampel answers */
    xTaskCreate(led_task, "ampel_leds", 4096, NULL, 5, NULL);
    wifi_start();
}
