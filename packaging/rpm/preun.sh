# Last copy going away: stop and disable the re-check units. The journal
# (/var/lib/gdrprov) is left alone: `gdrprov rollback` stays possible.
if [ "$1" -eq 0 ]; then
  systemctl --no-reload disable --now gdrprov-recheck.path gdrprov-recheck.service >/dev/null 2>&1 || :
fi
exit 0
