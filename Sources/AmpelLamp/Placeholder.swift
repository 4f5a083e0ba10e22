// AmpelLamp: placeholder until its issue lands.
