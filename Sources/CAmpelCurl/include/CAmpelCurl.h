#ifndef AMPEL_CAMPELCURL_H
#define AMPEL_CAMPELCURL_H
/* libcurl as Ampel's HTTP client (AmpelData's HTTPClient). curl_easy_setopt and
 * curl_easy_getinfo are variadic, which Swift cannot call: these functions pass each kind of
 * argument with its type written out. Nothing else lives here; the policy (timeouts, redirects,
 * protocols) is in Swift. */
#include <curl/curl.h>
#include <stddef.h>

/* The callbacks, as libcurl calls them (CURLOPT_WRITEFUNCTION, CURLOPT_HEADERFUNCTION). */
typedef size_t (*ampel_curl_data_fn)(char *data, size_t size, size_t count, void *context);

CURLcode ampel_curl_set_long(CURL *easy, CURLoption option, long value);
/* A string (copied by libcurl), a pointer or a curl_slist. */
CURLcode ampel_curl_set_pointer(CURL *easy, CURLoption option, const void *value);
CURLcode ampel_curl_set_data_callback(CURL *easy, CURLoption option, ampel_curl_data_fn callback);

CURLcode ampel_curl_get_long(CURL *easy, CURLINFO info, long *value);
CURLcode ampel_curl_get_off(CURL *easy, CURLINFO info, curl_off_t *value);
CURLcode ampel_curl_get_socket(CURL *easy, curl_socket_t *value);

/* The easy handle and result of a CURLMSG_DONE message (a union member in C). */
CURL *ampel_curl_message_handle(const CURLMsg *message);
int ampel_curl_message_is_done(const CURLMsg *message);
CURLcode ampel_curl_message_result(const CURLMsg *message);

#endif
