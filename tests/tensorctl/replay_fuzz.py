# replay_fuzz.py: mutated replay logs for tensorctl's tests and the check of replay's answer to
# them: one valid JSON output line per input line, no malformed line answered with outputs, no
# well-formed line of the right shape refused, ids echoed. Models: tiny, cols, fixed
# (tests/tensorctl/*.json).
#   replay_fuzz.py gen LOG SEED N      write N mutated lines
#   replay_fuzz.py check LOG OUT       exit 1 with the first problems printed
import json
import random
import sys

BASE = ['{"id": %d, "model": "tiny", "inputs": {"ids": [1, 2, 3, 4, 5, 6, 7, 8]}}',
        '{"id": "s%d", "model": "cols", "inputs": {"x": [[1, -2, 3], [-4, 5, 0.1]]}}',
        '{"id": [%d, {"k": "v\\"}\\u00e9"}], "model": "fixed", "inputs": {"a": [1e3, -2.5e-3, 3]},'
        ' "z": {"q": [null, true]}}']
ALPHA = '{}[]",:0123456789.eE-+ tfnul\\xu'
SHAPES = {'tiny': ('ids', [8]), 'cols': ('x', [2, 3]), 'fixed': ('a', [3])}


def gen(path, seed, n):
    rnd = random.Random(seed)
    with open(path, 'w') as f:
        for i in range(n):
            s = rnd.choice(BASE) % i
            for _ in range(rnd.randint(0, 4)):
                k = rnd.randrange(len(s) + 1)
                op = rnd.random()
                if op < 0.4:
                    s = s[:k] + rnd.choice(ALPHA) + s[k:]
                elif op < 0.8:
                    s = s[:k] + s[k + 1:]
                else:
                    s = s[:k]
            f.write(s.replace('\n', ' ') + '\n')


def shape(v):
    """The shape of nested lists, None when ragged."""
    if not isinstance(v, list):
        return []
    subs = [shape(x) for x in v]
    if any(s != subs[0] for s in subs) or None in subs:
        return None
    return [len(v)] + (subs[0] if subs else [])


def numbers(v):
    return all(numbers(x) for x in v) if isinstance(v, list) else \
        isinstance(v, (int, float)) and v == v and abs(v) != float('inf')


def should_work(j):
    if not isinstance(j, dict) or j.get('model') not in SHAPES:
        return False
    name, sh = SHAPES[j['model']]
    inp = j.get('inputs')
    if not isinstance(inp, dict) or list(inp) != [name] or shape(inp[name]) != sh:
        return False
    flat = inp[name] if j['model'] != 'cols' else inp[name][0] + inp[name][1]
    if not numbers(flat) or any(isinstance(v, bool) for v in flat):
        return False
    if j['model'] == 'tiny':
        return all(float(v).is_integer() and abs(v) < 2 ** 31 for v in flat)
    return all(abs(v) < 3e38 for v in flat)


def check(log, out):
    a = open(log).read().split('\n')[:-1]
    b = open(out).read().split('\n')[:-1]
    problems = [] if len(a) == len(b) else ['%d input lines, %d output lines' % (len(a), len(b))]
    for x, y in zip(a, b):
        try:
            o = json.loads(y)
        except ValueError:
            problems.append('output not JSON: %r' % y)
            continue
        try:
            j = json.loads(x)
        except ValueError:
            j = None
        if 'outputs' in o and j is None:
            problems.append('malformed line answered: %r -> %r' % (x, y))
        elif 'outputs' in o and 'id' in j and j['id'] != o.get('id'):
            problems.append('id not echoed: %r -> %r' % (x, y))
        elif 'outputs' not in o and should_work(j):
            problems.append('good line refused: %r -> %r' % (x, y))
    for p in problems[:10]:
        print('replay_fuzz:', p)
    return 1 if problems else 0


if __name__ == '__main__':
    if sys.argv[1] == 'gen':
        gen(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(check(sys.argv[2], sys.argv[3]))
