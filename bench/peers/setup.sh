#!/usr/bin/env bash
# The peer savers for bench/compare.py, in two venvs of their own (their pins conflict:
# tigris and s3 need aioboto3 15.5, which pins botocore 1.40; langgraph-checkpoint-aws
# needs boto3 >= 1.43.64). Each also gets LangGraph, boto3 (the adapters make buckets and
# tables with it) and this library, whose aiobotocore pin (3.10 in -a, 2.25.1 with the
# aioboto3 extra in -b) gives pip's resolver one answer. Takes a few minutes; compare.py
# skips a peer whose venv is absent. This library goes in editable: the peers run
# bench/chat.py, which uses its testing helpers as they are in the tree. The Postgres
# peer also needs Debian's postgresql package (its initdb and pg_ctl): compare.py starts
# a cluster of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-peers-a
.venv-peers-a/bin/pip install -q "langgraph==1.2.24" boto3 -e .. \
  "langgraph-checkpoint-aws==1.2.6" "langgraph-checkpoint-objectstorage[s3]==0.1.15" \
  "langgraph-checkpoint-postgres==3.2.0" "psycopg[binary,pool]"
python3 -m venv .venv-peers-b
.venv-peers-b/bin/pip install -q "langgraph==1.2.24" boto3 -e "..[aioboto3]" \
  "langgraph-checkpoint-tigris==0.1.0" "langgraph-checkpoint-s3==0.1.3"
echo "peer venvs ready: bench/.venv-peers-a (aws, objectstorage, postgres), bench/.venv-peers-b (tigris, s3)"
echo "Postgres also needs the server: apt install postgresql (compare.py starts its own cluster)"
