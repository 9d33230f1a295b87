# shellcheck shell=bash
# The VM testbed's stand-in kernel modules (sourced by ../lib.sh).

# --- stand-in kernel modules (scenarios 13 and 16) ---------------------------------------------------

# patch_module SRC DST OLD NEW: a copy of module SRC (uncompressed ELF64) that loads as NEW: the name in
# struct module (section .gnu.linkonce.this_module; char name[MODULE_NAME_LEN = 56] after `state` and
# `list`), name= in .modinfo (OLD's alias= and description= strings dropped: NEW must not take over OLD's
# aliases, and they make room for the longer name; the section keeps its size, padded with NULs), and the
# appended signature cut off (... signature | struct module_signature, 12 bytes ending in the big-endian
# sig_len | "~Module signature appended~\n"): a signature that no longer matches is refused, none only taints.
patch_module() {
  python3 - "$@" <<'PY'
import struct, sys
src, dst, old, new = sys.argv[1], sys.argv[2], sys.argv[3].encode(), sys.argv[4].encode()
d = bytearray(open(src, 'rb').read())
def die(m): sys.exit('patch_module: ' + m)
magic = b'~Module signature appended~\n'
if d.endswith(magic):
    sig_len, = struct.unpack_from('>I', d, len(d) - len(magic) - 4)
    cut = len(d) - len(magic) - 12 - sig_len
    if cut <= 0: die('bad signature length %d' % sig_len)
    del d[cut:]
    print('signature: %d bytes, cut off' % sig_len)
else:
    print('signature: none')
if d[:4] != b'\x7fELF' or d[4] != 2 or d[5] != 1: die('not a little-endian ELF64 file')
shoff, = struct.unpack_from('<Q', d, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3a)
hdr = [struct.unpack_from('<IIQQQQ', d, shoff + i * shentsize) for i in range(shnum)]
stro = hdr[shstrndx][4]
sec = {}
for nm, _t, _f, _a, off, size in hdr:
    sec[bytes(d[stro + nm:d.index(b'\0', stro + nm)]).decode()] = (off, size)
for s in ('.gnu.linkonce.this_module', '.modinfo'):
    if s not in sec: die('no section ' + s)
off, size = sec['.gnu.linkonce.this_module']
at = d.find(old + b'\0', off, off + size)
if at < 0: die('no "%s\\0" in .gnu.linkonce.this_module' % old.decode())
if len(new) + 1 > 56 or at + 56 > off + size: die('%s does not fit struct module name[56]' % new.decode())
d[at:at + 56] = (new + b'\0').ljust(56, b'\0')
print('struct module name: at offset %d of .gnu.linkonce.this_module' % (at - off))
off, size = sec['.modinfo']
strs = [s for s in bytes(d[off:off + size]).split(b'\0') if s]
if b'name=' + old not in strs: die('no name=%s in .modinfo' % old.decode())
strs = [b'name=' + new if s == b'name=' + old else s for s in strs
        if not s.startswith((b'alias=', b'description='))]
blob = b'\0'.join(strs) + b'\0'
if len(blob) > size: die('.modinfo does not fit (%d > %d bytes)' % (len(blob), size))
d[off:off + size] = blob.ljust(size, b'\0')
print('modinfo: ' + ' '.join(s.decode() for s in strs))
open(dst, 'wb').write(d)
PY
}
