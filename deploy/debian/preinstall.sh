#!/bin/sh
# The unprivileged user the service runs as.
set -e
if ! getent group signalbox >/dev/null; then
  addgroup --system signalbox >/dev/null
fi
if ! getent passwd signalbox >/dev/null; then
  adduser --system --ingroup signalbox --home /var/lib/signalbox --no-create-home \
    --shell /usr/sbin/nologin --gecos "signalbox" signalbox >/dev/null
fi
