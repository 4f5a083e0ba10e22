#ifndef AMPEL_CMOSQUITTO_SHIM_H
#define AMPEL_CMOSQUITTO_SHIM_H
#include <mosquitto.h>
#include <mqtt_protocol.h>
#endif
