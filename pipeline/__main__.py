from pipeline.cli.main import entry

entry()
