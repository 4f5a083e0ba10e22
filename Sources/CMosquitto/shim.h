#ifndef AMPEL_CMOSQUITTO_SHIM_H
#define AMPEL_CMOSQUITTO_SHIM_H
/* libmosquitto's public headers, seen only by AmpelMQTT's Mosquitto layer. */
#include <mosquitto.h>
#include <mqtt_protocol.h>
#endif
