// AmpelTestSupport: placeholder.
