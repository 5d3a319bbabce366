"""From log files to records: finding the files, reading their lines, the format readers and the C reader."""
