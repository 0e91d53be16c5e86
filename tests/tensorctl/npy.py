# npy.py: writes a .npy file without NumPy for tensorctl's tests: npy.py OUT DTYPE SHAPE VALUE...
# (DTYPE <f4 or <i4; SHAPE like 10,784; the values repeat to fill the shape).
import struct
import sys

out, descr, shape = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split(',') if x]
vals = [float(v) if descr == '<f4' else int(v) for v in sys.argv[4:]] or [0]
n = 1
for d in shape:
    n *= d
dims = ', '.join(str(d) for d in shape) + (',' if len(shape) == 1 else '')
head = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
head += ' ' * ((64 - (10 + len(head) + 1) % 64) % 64) + '\n'
with open(out, 'wb') as f:
    f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(head)) + head.encode())
    f.write(struct.pack('<%d%s' % (n, descr[1]), *[vals[i % len(vals)] for i in range(n)]))
