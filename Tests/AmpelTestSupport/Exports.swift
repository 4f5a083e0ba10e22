// The tests build RKI district files through the helpers they import already.
@_exported import AmpelSyntheticData
