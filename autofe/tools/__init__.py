"""Domain tools (event-log reading, decompression); protocol wrappers live elsewhere."""
