#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl stop signalbox.service >/dev/null 2>&1 || true
  systemctl disable signalbox.service >/dev/null 2>&1 || true
fi
