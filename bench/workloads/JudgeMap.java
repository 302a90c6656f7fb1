// A JVM service's cache for the judge bench: a HashMap of 8 M boxed keys to small long[] values
// (about 1 GiB of a 2 GiB heap), read by two threads with random gets, among the first 1 % of
// the keys (narrow) or among all of them (wide). The keys are boxed once, so reads allocate
// nothing and the heap holds still; the collector chosen on the command line lays it out.
//
// usage: java -Xms2g -Xmx2g -XX:+Use...GC JudgeMap SECONDS
//   prints "ready" once the map is filled, then reads until SECONDS have passed; a line "wide"
//   (or "narrow") on stdin switches the share read.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.HashMap;

public class JudgeMap {
    static final int KEYS = 8_000_000;
    static final int NARROW = KEYS / 100;
    static volatile int share = NARROW;
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        long end = System.nanoTime() + Long.parseLong(args[0]) * 1_000_000_000L;
        Long[] keys = new Long[KEYS];
        HashMap<Long, long[]> map = new HashMap<>(KEYS * 2);
        for (int i = 0; i < KEYS; i++) {
            keys[i] = (long) i;
            map.put(keys[i], new long[] {i, 2L * i});
        }
        System.gc();
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
                for (String line; (line = in.readLine()) != null; ) {
                    share = line.trim().equals("wide") ? KEYS : NARROW;
                }
            } catch (Exception e) {
                // stdin closed: keep the share.
            }
        });
        stdin.setDaemon(true);
        stdin.start();
        Thread[] readers = new Thread[2];
        for (int t = 0; t < readers.length; t++) {
            final long seed = 0x9E3779B97F4A7C15L * (t + 1);
            readers[t] = new Thread(() -> {
                long x = seed, sum = 0;
                while (System.nanoTime() < end) {
                    for (int i = 0; i < 100_000; i++) {
                        x ^= x << 13;
                        x ^= x >>> 7;
                        x ^= x << 17;
                        sum += map.get(keys[(int) Long.remainderUnsigned(x, share)])[1];
                    }
                }
                sink = sum;
            });
            readers[t].start();
        }
        // Once the readers' threads exist: a monitor that attaches on "ready" finds them all.
        Thread.sleep(1000);
        System.out.println("ready");
        System.out.flush();
        for (Thread r : readers) {
            r.join();
        }
    }
}
