"""The cache: each log file's records as Parquet and Arrow parts, reused while the file is unchanged."""
