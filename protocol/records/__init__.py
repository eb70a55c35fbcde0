"""Generated codecs, one module per schema; see kraftpy.codegen."""
