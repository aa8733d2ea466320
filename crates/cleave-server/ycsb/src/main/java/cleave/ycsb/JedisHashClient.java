package cleave.ycsb;

import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;

import redis.clients.jedis.Jedis;
import redis.clients.jedis.Pipeline;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

/**
 * YCSB over any Redis server: each record is a hash of its fields, and an
 * index of every key, a sorted set whose members all have score 0, gives
 * scans their order (ZRANGEBYLEX from the start key). One connection per
 * YCSB client thread, as YCSB makes one DB object per thread.
 *
 * Properties: redis.host (127.0.0.1), redis.port (6379), redis.timeout
 * (milliseconds, 10000).
 */
public final class JedisHashClient extends DB {
  /** The sorted set holding every key, for scans. */
  static final String INDEX = "_indices";

  private Jedis jedis;

  @Override
  public void init() throws DBException {
    Properties p = getProperties();
    String host = p.getProperty("redis.host", "127.0.0.1");
    int port = Integer.parseInt(p.getProperty("redis.port", "6379"));
    int timeout = Integer.parseInt(p.getProperty("redis.timeout", "10000"));
    try {
      jedis = new Jedis(host, port, timeout);
      jedis.ping();
    } catch (RuntimeException e) {
      throw new DBException("connecting to " + host + ":" + port, e);
    }
  }

  @Override
  public void cleanup() throws DBException {
    if (jedis != null) {
      jedis.close();
    }
  }

  @Override
  public Status read(String table, String key, Set<String> fields,
                     Map<String, ByteIterator> result) {
    try {
      if (fields == null) {
        Map<String, String> all = jedis.hgetAll(key);
        if (all.isEmpty()) {
          return Status.NOT_FOUND;
        }
        StringByteIterator.putAllAsByteIterators(result, all);
        return Status.OK;
      }
      String[] names = fields.toArray(new String[0]);
      List<String> values = jedis.hmget(key, names);
      boolean found = false;
      for (int i = 0; i < names.length; i++) {
        String v = values.get(i);
        if (v != null) {
          result.put(names[i], new StringByteIterator(v));
          found = true;
        }
      }
      return found ? Status.OK : Status.NOT_FOUND;
    } catch (RuntimeException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    try {
      // One round trip for the record and its index entry.
      Pipeline p = jedis.pipelined();
      p.hset(key, StringByteIterator.getStringMap(values));
      p.zadd(INDEX, 0, key);
      return allOk(p.syncAndReturnAll());
    } catch (RuntimeException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    try {
      jedis.hset(key, StringByteIterator.getStringMap(values));
      return Status.OK;
    } catch (RuntimeException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status delete(String table, String key) {
    try {
      Pipeline p = jedis.pipelined();
      p.del(key);
      p.zrem(INDEX, key);
      return allOk(p.syncAndReturnAll());
    } catch (RuntimeException e) {
      return Status.ERROR;
    }
  }

  /** A pipeline's replies carry errors (OOM, say) as exceptions, unthrown. */
  private static Status allOk(List<Object> replies) {
    for (Object r : replies) {
      if (r instanceof Exception) {
        return Status.ERROR;
      }
    }
    return Status.OK;
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    try {
      List<String> keys = jedis.zrangeByLex(INDEX, "[" + startkey, "+", 0, recordcount);
      for (String key : keys) {
        HashMap<String, ByteIterator> values = new HashMap<>();
        Status s = read(table, key, fields == null ? null : new HashSet<>(fields), values);
        if (s == Status.ERROR) {
          return s;
        }
        result.add(values);
      }
      return Status.OK;
    } catch (RuntimeException e) {
      return Status.ERROR;
    }
  }
}
