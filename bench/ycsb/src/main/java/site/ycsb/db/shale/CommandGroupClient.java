package site.ycsb.db.shale;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;

import redis.clients.jedis.Jedis;
import redis.clients.jedis.Pipeline;
import redis.clients.jedis.Transaction;
import redis.clients.jedis.exceptions.JedisException;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

/**
 * A YCSB binding for any Redis-compatible server, where one YCSB record is one Redis key of the
 * type chosen by {@code redis.command_group}, as in Tair's persistent-memory benchmark:
 *
 * <ul>
 *   <li>{@code string}: SET/GET. With {@code fieldcount=1} a record is the bare value; a record of
 *       several fields is one string of length-prefixed fields, so updating a field reads and
 *       rewrites it under WATCH.
 *   <li>{@code hash} (default): HSET/HGETALL/HMGET, like YCSB's own Redis binding.
 *   <li>{@code list}: RPUSH of the values in field order; LRANGE/LINDEX; LSET per updated field.
 *   <li>{@code set}: SADD of {@code field=value} members; SMEMBERS; an update reads the members
 *       under WATCH, then removes the old member of each updated field and adds the new one in one
 *       MULTI.
 *   <li>{@code zset}: ZADD of {@code field=value} members scored by field number; ZRANGE; an update
 *       is ZREMRANGEBYSCORE and ZADD of that field's score in one MULTI.
 * </ul>
 *
 * <p>Properties: {@code redis.host}, {@code redis.port}, {@code redis.password} (a bare password
 * or {@code user:password}), {@code redis.timeout} (ms), {@code redis.command_group}, and
 * {@code redis.index}: keep every inserted key in the sorted set {@code _indices} scored by its
 * hash code, which SCAN (workload E) reads, as YCSB's Redis binding does. It defaults to on only
 * when the workload has scans, so loads for other workloads measure the record writes alone.
 */
public class CommandGroupClient extends DB {
  static final String INDEX_KEY = "_indices";
  /** Attempts of a WATCH-guarded read-modify-write before the update reports an error. */
  static final int WATCH_ATTEMPTS = 32;

  private Jedis jedis;
  private CommandGroup group;
  private boolean indexed;
  private String fieldPrefix;
  private boolean singleField;

  enum CommandGroup { STRING, HASH, LIST, SET, ZSET }

  @Override
  public void init() throws DBException {
    Properties props = getProperties();
    String host = props.getProperty("redis.host", "127.0.0.1");
    int port = Integer.parseInt(props.getProperty("redis.port", "6379"));
    int timeout = Integer.parseInt(props.getProperty("redis.timeout", "30000"));
    String groupName = props.getProperty("redis.command_group", "hash");
    try {
      group = CommandGroup.valueOf(groupName.toUpperCase());
    } catch (IllegalArgumentException e) {
      throw new DBException("redis.command_group must be string, hash, list, set or zset, not " + groupName);
    }
    double scans = Double.parseDouble(props.getProperty("scanproportion", "0"));
    indexed = Boolean.parseBoolean(props.getProperty("redis.index", Boolean.toString(scans > 0)));
    fieldPrefix = props.getProperty("fieldnameprefix", "field");
    singleField = Long.parseLong(props.getProperty("fieldcount", "10")) == 1;
    try {
      jedis = new Jedis(host, port, timeout);
      String password = props.getProperty("redis.password");
      if (password != null && !password.isEmpty()) {
        int colon = password.indexOf(':');
        if (colon >= 0) {
          jedis.auth(password.substring(0, colon), password.substring(colon + 1));
        } else {
          jedis.auth(password);
        }
      }
      jedis.ping();
    } catch (JedisException e) {
      throw new DBException("cannot connect to " + host + ":" + port + ": " + e.getMessage(), e);
    }
  }

  @Override
  public void cleanup() throws DBException {
    if (jedis != null) {
      jedis.close();
    }
  }

  @Override
  public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
    try {
      Map<String, String> record = readRecord(key, fields);
      if (record.isEmpty()) {
        return Status.NOT_FOUND;
      }
      StringByteIterator.putAllAsByteIterators(result, record);
      return Status.OK;
    } catch (JedisException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    try {
      List<String> keys = jedis.zrangeByScore(INDEX_KEY, hash(startkey), Double.POSITIVE_INFINITY, 0, recordcount);
      for (String key : keys) {
        HashMap<String, ByteIterator> values = new HashMap<>();
        StringByteIterator.putAllAsByteIterators(values, readRecord(key, fields));
        result.add(values);
      }
      return Status.OK;
    } catch (JedisException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    try {
      return writeRecord(key, StringByteIterator.getStringMap(values), false) ? Status.OK : Status.ERROR;
    } catch (JedisException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    try {
      writeRecord(key, StringByteIterator.getStringMap(values), true);
      if (indexed) {
        jedis.zadd(INDEX_KEY, hash(key), key);
      }
      return Status.OK;
    } catch (JedisException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status delete(String table, String key) {
    try {
      long removed = jedis.del(key);
      if (indexed) {
        removed += jedis.zrem(INDEX_KEY, key);
      }
      return removed == 0 ? Status.NOT_FOUND : Status.OK;
    } catch (JedisException e) {
      return Status.ERROR;
    }
  }

  /** The record's fields (all of them when {@code fields} is null); empty when the key is missing. */
  private Map<String, String> readRecord(String key, Set<String> fields) {
    Map<String, String> record;
    switch (group) {
    case STRING:
      record = decodeString(jedis.get(key));
      break;
    case HASH:
      if (fields != null) {
        String[] names = fields.toArray(new String[0]);
        List<String> found = jedis.hmget(key, names);
        record = new HashMap<>();
        for (int i = 0; i < names.length; i++) {
          if (found.get(i) != null) {
            record.put(names[i], found.get(i));
          }
        }
        return record;
      }
      record = jedis.hgetAll(key);
      break;
    case LIST:
      if (fields != null && fields.size() == 1) {
        String name = fields.iterator().next();
        String value = jedis.lindex(key, fieldNumber(name));
        record = new HashMap<>();
        if (value != null) {
          record.put(name, value);
        }
        return record;
      }
      record = new HashMap<>();
      List<String> elements = jedis.lrange(key, 0, -1);
      for (int i = 0; i < elements.size(); i++) {
        record.put(fieldPrefix + i, elements.get(i));
      }
      break;
    case SET:
      record = decodeMembers(jedis.smembers(key));
      break;
    default:
      record = decodeMembers(jedis.zrange(key, 0, -1));
      break;
    }
    if (fields != null) {
      record.keySet().retainAll(fields);
    }
    return record;
  }

  /**
   * Writes the given fields; {@code fresh} when the record is new (insert), not an update.
   * Returns false when a read-modify-write kept losing its WATCH to concurrent updates.
   */
  private boolean writeRecord(String key, Map<String, String> values, boolean fresh) {
    switch (group) {
    case STRING:
      if (fresh || singleField) {
        jedis.set(key, encodeString(values));
        return true;
      }
      for (int attempt = 0; attempt < WATCH_ATTEMPTS; attempt++) {
        jedis.watch(key);
        Map<String, String> record = decodeString(jedis.get(key));
        record.putAll(values);
        Transaction txn = jedis.multi();
        txn.set(key, encodeString(record));
        if (txn.exec() != null) {
          return true;
        }
      }
      return false;
    case HASH:
      jedis.hset(key, values);
      return true;
    case LIST:
      if (fresh) {
        jedis.del(key);
        jedis.rpush(key, inFieldOrder(values));
        return true;
      }
      Pipeline pipeline = jedis.pipelined();
      for (Map.Entry<String, String> field : values.entrySet()) {
        pipeline.lset(key, fieldNumber(field.getKey()), field.getValue());
      }
      for (Object reply : pipeline.syncAndReturnAll()) {
        if (reply instanceof JedisException) {
          throw (JedisException) reply;
        }
      }
      return true;
    case SET:
      if (fresh) {
        jedis.sadd(key, members(values));
        return true;
      }
      for (int attempt = 0; attempt < WATCH_ATTEMPTS; attempt++) {
        jedis.watch(key);
        List<String> stale = new ArrayList<>();
        for (String member : jedis.smembers(key)) {
          if (values.containsKey(fieldOf(member))) {
            stale.add(member);
          }
        }
        Transaction txn = jedis.multi();
        if (!stale.isEmpty()) {
          txn.srem(key, stale.toArray(new String[0]));
        }
        txn.sadd(key, members(values));
        if (txn.exec() != null) {
          return true;
        }
      }
      return false;
    default:
      Transaction zsetTxn = jedis.multi();
      for (Map.Entry<String, String> field : values.entrySet()) {
        double score = fieldNumber(field.getKey());
        if (!fresh) {
          zsetTxn.zremrangeByScore(key, score, score);
        }
        zsetTxn.zadd(key, score, field.getKey() + "=" + field.getValue());
      }
      zsetTxn.exec();
      return true;
    }
  }

  /** With one field per record the value is stored bare; otherwise as length-prefixed pairs. */
  private String encodeString(Map<String, String> values) {
    if (singleField) {
      return values.values().iterator().next();
    }
    StringBuilder out = new StringBuilder("\u0000");
    for (Map.Entry<String, String> field : values.entrySet()) {
      for (String part : new String[] {field.getKey(), field.getValue()}) {
        out.append(part.length()).append(':').append(part);
      }
    }
    return out.toString();
  }

  private Map<String, String> decodeString(String stored) {
    Map<String, String> record = new HashMap<>();
    if (stored == null) {
      return record;
    }
    if (!stored.startsWith("\u0000")) {
      record.put(fieldPrefix + "0", stored);
      return record;
    }
    int pos = 1;
    String name = null;
    while (pos < stored.length()) {
      int colon = stored.indexOf(':', pos);
      int length = Integer.parseInt(stored.substring(pos, colon));
      String part = stored.substring(colon + 1, colon + 1 + length);
      pos = colon + 1 + length;
      if (name == null) {
        name = part;
      } else {
        record.put(name, part);
        name = null;
      }
    }
    return record;
  }

  private int fieldNumber(String name) {
    try {
      return Integer.parseInt(name.substring(fieldPrefix.length()));
    } catch (NumberFormatException | IndexOutOfBoundsException e) {
      return Math.floorMod(name.hashCode(), 1 << 20);
    }
  }

  private String[] inFieldOrder(Map<String, String> values) {
    String[] ordered = new String[values.size()];
    List<String> extra = new ArrayList<>();
    for (Map.Entry<String, String> field : values.entrySet()) {
      int n = fieldNumber(field.getKey());
      if (n < ordered.length && ordered[n] == null) {
        ordered[n] = field.getValue();
      } else {
        extra.add(field.getValue());
      }
    }
    int next = 0;
    for (int i = 0; i < ordered.length; i++) {
      if (ordered[i] == null) {
        ordered[i] = extra.get(next++);
      }
    }
    return ordered;
  }

  private static String[] members(Map<String, String> values) {
    List<String> members = new ArrayList<>();
    for (Map.Entry<String, String> field : values.entrySet()) {
      members.add(field.getKey() + "=" + field.getValue());
    }
    return members.toArray(new String[0]);
  }

  private static String fieldOf(String member) {
    int eq = member.indexOf('=');
    return eq < 0 ? member : member.substring(0, eq);
  }

  private static Map<String, String> decodeMembers(Iterable<String> members) {
    Map<String, String> record = new HashMap<>();
    for (String member : members) {
      int eq = member.indexOf('=');
      if (eq > 0) {
        record.put(member.substring(0, eq), member.substring(eq + 1));
      }
    }
    return record;
  }

  private static double hash(String key) {
    return key.hashCode();
  }
}
