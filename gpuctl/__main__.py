from gpuctl.app import main

main()
