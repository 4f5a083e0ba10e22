// AmpelGeo: placeholder until its issue lands.
