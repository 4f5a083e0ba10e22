// AmpelMQTT: placeholder until its issue lands.
