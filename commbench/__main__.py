from commbench.cli.app import main

main()
