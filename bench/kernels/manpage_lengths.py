#!/usr/bin/python3
"""Sequence lengths of a real public text corpus: the Linux man-pages project's pages
as Debian ships them (packages manpages and manpages-dev), one page one sequence.

    bench/kernels/manpage_lengths.py > lengths.txt

Rule: each page's roff source (gunzipped; aliases that are symbolic links
skipped) split with the regular expression \\w+|[^\\w\\s] -- runs of word
characters and single punctuation marks, the pre-tokenisation of BPE
tokenisers without their merges -- and counted. One number a line, in the
order dpkg lists the files.
"""
import gzip
import os
import re
import subprocess
import sys

TOKEN = re.compile(r"\w+|[^\w\s]")


def main():
    listing = subprocess.run(["dpkg", "-L", "manpages", "manpages-dev"], capture_output=True,
                             text=True, check=True).stdout.splitlines()
    for path in listing:
        if not path.endswith(".gz") or os.path.islink(path):
            continue
        with gzip.open(path, "rt", errors="replace") as f:
            print(len(TOKEN.findall(f.read())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
