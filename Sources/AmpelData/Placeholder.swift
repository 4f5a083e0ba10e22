// AmpelData: placeholder until its issue lands.
