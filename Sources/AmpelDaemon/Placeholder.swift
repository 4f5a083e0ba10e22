// AmpelDaemon: placeholder until its issue lands.
