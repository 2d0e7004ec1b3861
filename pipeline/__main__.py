from pipeline.quick import entry

entry()
