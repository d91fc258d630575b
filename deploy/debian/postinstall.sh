#!/bin/sh
set -e
chown signalbox:signalbox /var/lib/signalbox
chmod 0750 /var/lib/signalbox
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null || true
  # Enabled, not started: the operator reviews /etc/signalbox/signalbox.yaml first.
  systemctl enable signalbox.service >/dev/null || true
fi
