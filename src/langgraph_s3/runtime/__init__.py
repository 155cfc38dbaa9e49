"""What the saver and the store share at run time: construction, lifecycle, the sync loop."""
