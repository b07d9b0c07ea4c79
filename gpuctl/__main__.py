from gpuctl.app import entry

entry()
