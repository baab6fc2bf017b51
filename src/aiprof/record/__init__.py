"""The run record on disk: where runs go (``rundir``) and how one is read back (``runrecord``)."""
