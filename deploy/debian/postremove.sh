#!/bin/sh
# On purge, the data directory and the user go too; on remove they stay.
set -e
if [ "$1" = "purge" ]; then
  rm -rf /var/lib/signalbox
  if getent passwd signalbox >/dev/null; then
    deluser --quiet --system signalbox >/dev/null || true
  fi
  if getent group signalbox >/dev/null; then
    delgroup --quiet --system signalbox >/dev/null || true
  fi
fi
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null || true
fi
