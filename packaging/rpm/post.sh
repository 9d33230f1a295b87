# The re-check when the running kernel's module index changes (DKMS builds
# included): enabled on first install.
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || :
fi
if [ "$1" -eq 1 ]; then
  systemctl --no-reload enable gdrprov-recheck.path >/dev/null 2>&1 || :
  if [ -d /run/systemd/system ]; then
    systemctl start gdrprov-recheck.path >/dev/null 2>&1 || :
  fi
fi
exit 0
