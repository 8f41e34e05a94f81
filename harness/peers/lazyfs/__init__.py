"""A lazy file system: a directory whose files lose what was not fsynced at a power loss
(docs/lazyfs.md). cache.py is the page cache model, fs.py the FUSE daemon, mount.py starts,
stops and power-cuts it."""
