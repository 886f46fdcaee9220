#!/bin/sh
# embed.sh FILE NAME - writes C source defining the bytes of FILE as NAME and
# their count as NAME_len, so the dashboard ships inside the binary.
set -eu
file=$1
name=$2
echo "/* Generated from $file by api/web/embed.sh; do not edit. */"
echo "#include <stddef.h>"
echo "extern const unsigned char ${name}[];"
echo "extern const size_t ${name}_len;"
echo "const unsigned char ${name}[] = {"
od -An -v -tx1 "$file" | sed 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g'
echo "};"
echo "const size_t ${name}_len = sizeof ${name};"
