#include "CAmpelCurl.h"

CURLcode ampel_curl_set_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}

CURLcode ampel_curl_set_pointer(CURL *easy, CURLoption option, const void *value) {
    return curl_easy_setopt(easy, option, value);
}

CURLcode ampel_curl_set_data_callback(CURL *easy, CURLoption option, ampel_curl_data_fn callback) {
    return curl_easy_setopt(easy, option, callback);
}

CURLcode ampel_curl_get_long(CURL *easy, CURLINFO info, long *value) {
    return curl_easy_getinfo(easy, info, value);
}

CURLcode ampel_curl_get_socket(CURL *easy, curl_socket_t *value) {
    return curl_easy_getinfo(easy, CURLINFO_ACTIVESOCKET, value);
}

CURLcode ampel_curl_get_off(CURL *easy, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(easy, info, value);
}

CURL *ampel_curl_message_handle(const CURLMsg *message) {
    return message->easy_handle;
}

int ampel_curl_message_is_done(const CURLMsg *message) {
    return message->msg == CURLMSG_DONE;
}

CURLcode ampel_curl_message_result(const CURLMsg *message) {
    return message->data.result;
}
