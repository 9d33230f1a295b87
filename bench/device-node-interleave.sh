#!/bin/bash
# bench copy --concurrent (bound, --no-numa-pin) and nvbandwidth host_to_all / all_to_host, interleaved, 3 rounds.
G=$GDRPROV
uptime
for i in 1 2 3; do
  echo "== round $i"
  $G bench copy --concurrent --format json > "$OUT/conc-bound-$i.json"
  $G bench copy --concurrent --no-numa-pin --format json > "$OUT/conc-unbound-$i.json"
  bash devbin/nvbandwidth-on-device.sh -t host_to_all_memcpy_ce all_to_host_memcpy_ce 2>&1 | grep -A3 "memcpy CE" | grep "^ 0"
  python3 -c "
import json
for k in ['bound','unbound']:
    d=json.load(open('$OUT/conc-%s-$i.json'%k)); b=d.get('body',d)
    print(k, ' '.join('%s h2d %.2f/%.2f d2h %.2f/%.2f'%(g['pci'][-4:],g['h2d']['alone_gbs'],g['h2d']['together_gbs'],g['d2h']['alone_gbs'],g['d2h']['together_gbs']) for g in b['gpus']))
"
done
uptime
