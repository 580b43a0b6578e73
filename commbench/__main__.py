from commbench.cli.app import main

if __name__ == "__main__":  # spawned ranks re-import this module as __mp_main__: they must not rerun the CLI
    main()
