// A Node.js service's cache for the judge bench: a Map of 5 M integer keys to small objects
// (several hundred MiB of V8 heap), read with random gets among the first 1 % of the keys
// (narrow) or among all of them (wide). Reads allocate nothing; they run in batches so that
// the event loop sees stdin between them.
//
// usage: node node_map.js SECONDS
//   prints "ready" once the map is filled, then reads until SECONDS have passed; a line "wide"
//   (or "narrow") on stdin switches the share read.
'use strict';
const KEYS = 5_000_000;
const NARROW = KEYS / 100;
const end = Date.now() + Number(process.argv[2]) * 1000;
const map = new Map();
for (let i = 0; i < KEYS; i++) {
  map.set(i, { id: i, twice: 2 * i });
}
let share = NARROW;
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => {
  const last = d.trim().split('\n').pop();
  share = last === 'wide' ? KEYS : NARROW;
});
let x = 0x2545f491 | 0;
let sum = 0;
function batch() {
  for (let i = 0; i < 200_000; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    sum += map.get((x >>> 0) % share).twice;
  }
  if (Date.now() < end) {
    setImmediate(batch);
  } else {
    process.exit(sum === -1 ? 1 : 0);
  }
}
console.log('ready');
batch();
