"""Trace report labels and bodies decoded by Spark SQL expressions (docs/design.md#trace-reports).

The same rules as store/trace.py's decoder, which the vectors in tests/vectors/ hold both to,
written as column expressions so that Spark decodes millions of reports in the JVM, with no
Python UDF. Only acceptance and the fields matter here (error columns and rules are the
Python decoder's business):

- one regular expression takes the label's syntax: ABNF strings are case-insensitive for ASCII
  letters only (Java's `(?i)` without UNICODE_CASE folds exactly those), HEXDIG and DIGIT are
  ASCII, the trailing NUL is optional, and `\\z` ends the text (Java's `$` would also allow a
  final line break);
- then the values: `hour` is a 12-hour clock (01-12; 12 AM is 00h, 12 PM is 12h), minutes and
  seconds 00-59, the year 20YY, the day of the month exists in that month and year, and the day
  name is that date's weekday. Every step is null-safe, so a malformed label gives nulls and
  `valid = false`, never an error under ANSI mode.

`with_label_fields(df, "label", "label_fields")` adds a struct column: valid, qm_id (as
written), message_id, hops, computer (the GUID, lowercase), time (TIMESTAMP, whole seconds,
UTC), has_seconds. `with_body_fields` adds valid, message_id and queue, the target queue's
format name as written; the format name is checked by a regular expression of the MS-MQMQ 2.1
forms that docs/design.md#queues lists, with the Python decoder's ranges (octets, ports, class D multicast)
and its reading of letters beyond ASCII (Java's \\p{L} and \\p{N} for Python's isalnum).

How, for speed (the pipeline decodes millions of reports): the regular expression runs once
per text (`rlike`); a label that matches has its ids at fixed columns and its time-date as its
last five words (`substring_index`, no array per row), whose fields are at fixed columns of
that tail (only the optional seconds shift the rest by three), so the fields are plain
substrings, and the date checks are
integer arithmetic (days from the civil date, Howard Hinnant's algorithm; the weekday from the
day number; month lengths with the Gregorian leap rule). Each value used several times is
computed in a projection of its own, which Spark keeps apart (it does not inline an expression
that is not cheap into several places); one nested expression would repeat the regular
expression and the date for every use, measured ten times slower.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_HEX = "[0-9A-Fa-f]"
_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")

LABEL_PATTERN = (
    rf"^({_HEX}{{4}}):({_HEX}{{8}}):({_HEX}{{2}}) (?i:received by) "
    rf"({_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}) (?i:at) "
    r"([0-9]{2}):([0-9]{2})(?::([0-9]{2}))? ((?i:AM|PM)) "
    rf"((?i:{'|'.join(_DAYS)})),((?i:{'|'.join(_MONTHS)})) ([0-9]{{2}}) ([0-9]{{2}})\x00?\z"
)

# The documented forms beyond [MS-MQQB] (store/trace.py's docstring has their ABNF): `received
# by` or `sent from … to <address>`, the computer a GUID or a machine name; `Report Message
# Conflict`; bodies with <NEXT HOP> and <HOP COUNT>. Their fields are not at fixed columns, so
# a matched label's words are found at its spaces (names and addresses hold none), and its
# time-date is always its last five words.
_NAME = "[0-9A-Za-z._-]"
_PORT_ANY = r"(?:[0-5]?[0-9]{1,4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
ADDRESS_PATTERN = rf"(?:{_HEX}{{8}}:{_HEX}{{12}}|{_NAME}{{1,255}}(?::{_PORT_ANY})?)"
ANY_LABEL_PATTERN = (
    rf"^({_HEX}{{4}}):({_HEX}{{8}}):({_HEX}{{2}}) "
    rf"(?:(?i:received by) {_NAME}{{1,255}}|(?i:sent from) {_NAME}{{1,255}} (?i:to) {ADDRESS_PATTERN}) (?i:at) "
    r"([0-9]{2}):([0-9]{2})(?::([0-9]{2}))? ((?i:AM|PM)) "
    rf"((?i:{'|'.join(_DAYS)})),((?i:{'|'.join(_MONTHS)})) ([0-9]{{2}}) ([0-9]{{2}})\x00?\z"
)
CONFLICT_PATTERN = r"^(?i:Report Message Conflict)\x00?\z"
_GUID_ONLY = rf"^{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}\z"

# queue-format (MS-MQMQ 2.1) in the forms docs/design.md#queues lists, as store/trace.py reads it
_GUID = rf"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"
_JOURNAL = r"(?:(?i:;JOURNAL))?"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|[01]?[0-9]?[0-9])"  # 1*3DIGIT, at most 255
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_MULTICAST = rf"(?:22[4-9]|23[0-9])(?:\.{_OCTET}){{3}}"  # class D
_PORT = r"(?:[0-5]?[0-9]{1,4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"  # 1*5DIGIT, ≤ 65535
_ALNUM = r"\p{L}\p{N}"  # letters and digits beyond ASCII, which store queue names may hold
_QUEUE_NAME = rf"[\x21\x23-\x2a\x2d-\x3a\x3c-\x5b\x5d-\x7f{_ALNUM}]{{1,124}}"
_COMPUTER = rf"[\x21-\x5b\x5d-\x7e{_ALNUM}]{{1,256}}"
_HOST = rf"[\x21-\x2e\x30-\x39\x3b-\x5b\x5d-\x7f{_ALNUM}]{{1,256}}"
_MACHINE_QUEUE = r"(?i:JOURNAL|DEADLETTER|DEADXACT)"
_ADDRESS = (rf"(?:(?i:TCP):{_IPV4}|(?i:OS):{_COMPUTER}|(?i:HTTPS?)://{_HOST}(?::{_PORT})?/(?i:MSMQ)"
            rf"|(?i:IPX):{_HEX}{{8}}:{_HEX}{{12}})")
QUEUE_FORMAT_PATTERN = (
    rf"(?:(?i:PUBLIC=){_GUID}{_JOURNAL}"
    rf"|(?i:PRIVATE=){_GUID}\\{_HEX}{{1,8}}{_JOURNAL}"
    rf"|(?i:DIRECT=){_ADDRESS}\\(?:(?i:PRIVATE\$)\\{_QUEUE_NAME}{_JOURNAL}"
    rf"|(?i:SYSTEM\$;){_MACHINE_QUEUE}|{_QUEUE_NAME}{_JOURNAL})"
    rf"|(?i:MACHINE=){_GUID};{_MACHINE_QUEUE}"
    rf"|(?i:MULTICAST=){_MULTICAST}:{_PORT})"
)
BODY_PATTERN = (
    rf"^(?i:<MESSAGE ID>)({_HEX}{{8}})(?i:</MESSAGE ID>)\r\n"
    rf"(?i:<TARGET QUEUE>)({QUEUE_FORMAT_PATTERN})(?i:</TARGET QUEUE>)\r\n\z"
)
ANY_BODY_PATTERN = (
    rf"^(?i:<MESSAGE ID>)({_HEX}{{8}})(?i:</MESSAGE ID>)\r\n"
    rf"(?i:<TARGET QUEUE>)({QUEUE_FORMAT_PATTERN})(?i:</TARGET QUEUE>)\r\n"
    rf"(?:(?i:<NEXT HOP>){ADDRESS_PATTERN}(?i:</NEXT HOP>)\r\n)?"
    r"(?:(?i:<HOP COUNT>)(?:[01]?[0-9]?[0-9]|2[0-4][0-9]|25[0-5])(?i:</HOP COUNT>)\r\n)?\z"
)
# on a matched body: what follows the target queue (a queue holds no SP, so the first
# </TARGET QUEUE> ends it)
_BODY_TAIL = (r"(?i)</TARGET QUEUE>\r\n(?:<NEXT HOP>([^<]*)</NEXT HOP>\r\n)?"
              r"(?:<HOP COUNT>([0-9]*)</HOP COUNT>\r\n)?\z")


def _civil_days(year: Column, month: Column, day: Column) -> Column:
    """Days from 1970-01-01 to a (proleptic Gregorian) date, for years 2000-2099: integer
    arithmetic only (H. Hinnant, days_from_civil)."""
    from pyspark.sql import functions as F

    y = year - F.when(month <= 2, 1).otherwise(0)
    era = F.floor(y / 400)
    yoe = y - era * 400
    doy = F.floor((153 * (month + F.when(month > 2, -3).otherwise(9)) + 2) / 5) + day - 1
    doe = yoe * 365 + F.floor(yoe / 4) - F.floor(yoe / 100) + doy
    return (era * 146097 + doe - 719468).cast("long")


def _month_length(year: Column, month: Column) -> Column:
    from pyspark.sql import functions as F

    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    return (F.when(month == 2, F.when(leap, 29).otherwise(28))
            .when(month.isin(4, 6, 9, 11), 30).otherwise(31))


def with_label_fields(df: DataFrame, label: str = "label", name: str = "label_fields", *,
                      strict: bool = False) -> DataFrame:
    """`df` with the struct column `name`: the fields of the label in column `label`, any
    documented form (with `strict`, [MS-MQQB]'s form only)."""
    from pyspark.sql import functions as F

    t = f"__{name}"
    original = F.col(label)
    df = df.withColumn(f"{t}_matched", F.coalesce(original.rlike(LABEL_PATTERN if strict else ANY_LABEL_PATTERN),
                                                  F.lit(False)))
    matched = F.col(f"{t}_matched")
    # the time-date is a matched label's last five words in every form: read at fixed columns
    # of that tail (names and addresses hold no space)
    df = df.withColumn(f"{t}_tail", F.when(matched, F.substring_index(original, " ", -5)))
    tail = F.col(f"{t}_tail")

    def at(column: int, length: int, shift: Column | None = None) -> Column:
        """The field at 1-based `column` of the tail (shifted past the seconds)."""
        start = F.lit(column) if shift is None else F.lit(column) + shift
        return F.substring(tail, start, F.lit(length))

    # hour 1-2, minute 4-5, then [":" second] 6-8; AM/PM, day, month, day of month and year
    # follow at fixed columns
    has_seconds = F.substring(tail, 6, 1) == ":"
    df = df.withColumn(f"{t}_shift", F.when(has_seconds, 3).otherwise(0))
    shift = F.col(f"{t}_shift")
    month = F.array_position(F.array(*map(F.lit, _MONTHS)), F.lower(at(14, 3, shift))).cast("int")
    df = df.withColumn(f"{t}_v", F.struct(
        at(1, 2).try_cast("int").alias("hour"),
        at(4, 2).try_cast("int").alias("minute"),
        F.when(shift == 3, at(7, 2).try_cast("int")).otherwise(F.lit(0)).alias("second"),
        (shift == 3).alias("has_seconds"),
        (F.upper(at(7, 2, shift)) == "PM").alias("pm"),
        F.array_position(F.array(*map(F.lit, _DAYS)), F.lower(at(10, 3, shift))).cast("int").alias("weekday"),
        month.alias("month"),
        at(18, 2, shift).try_cast("int").alias("day"),
        (F.lit(2000) + at(21, 2, shift).try_cast("int")).alias("year"),
    ))
    v = F.col(f"{t}_v")
    in_month = v["day"].between(1, _month_length(v["year"], v["month"])) & v["month"].between(1, 12)
    df = df.withColumn(f"{t}_days", F.when(in_month, _civil_days(v["year"], v["month"], v["day"])))
    days = F.col(f"{t}_days")
    weekday_of_date = (days + 3) % 7 + 1  # 1970-01-01 was a Thursday; Monday is 1
    df = df.withColumn(f"{t}_valid", F.coalesce(
        matched & v["hour"].between(1, 12) & v["minute"].between(0, 59) & v["second"].between(0, 59)
        & days.isNotNull() & (weekday_of_date == v["weekday"]),
        F.lit(False)))
    valid = F.col(f"{t}_valid")
    hour24 = (v["hour"] % 12) + F.when(v["pm"], F.lit(12)).otherwise(F.lit(0))
    seconds = days * 86400 + hour24 * 3600 + v["minute"] * 60 + v["second"]
    if strict:
        # qm-id 1-4, message-id 6-13, hops 15-16, `received by`, the GUID 30-65
        computer, next_hop = F.lower(F.substring(original, 30, 36)), F.lit(None).cast("string")
        event, conflict = F.lit("received"), F.lit(False)
    else:
        # words: ids, received|sent, by|from, computer, at|to, [address, at]
        def word(n: int) -> Column:
            return F.substring_index(F.substring_index(original, " ", n), " ", -1)

        sent = F.lower(F.substring(original, 18, 1)) == "s"
        name_ = word(4)
        computer = F.when(name_.rlike(_GUID_ONLY), F.lower(name_)).otherwise(name_)
        next_hop = F.when(sent, word(6))
        event = F.when(sent, F.lit("sent")).otherwise(F.lit("received"))
        conflict = F.coalesce(original.rlike(CONFLICT_PATTERN), F.lit(False))
    df = df.withColumn(name, F.struct(
        (valid | conflict).alias("valid"),
        F.when(valid, event).when(conflict, F.lit("conflict")).alias("event"),
        F.when(valid, F.substring(original, 1, 4)).alias("qm_id"),
        F.when(valid, F.conv(F.substring(original, 6, 8), 16, 10).try_cast("long")).alias("message_id"),
        F.when(valid, F.conv(F.substring(original, 15, 2), 16, 10).try_cast("int")).alias("hops"),
        F.when(valid, computer).alias("computer"),
        F.when(valid, F.timestamp_seconds(seconds)).alias("time"),
        F.when(valid, v["has_seconds"]).alias("has_seconds"),
        F.when(valid, next_hop).alias("next_hop"),
    ))
    return df.drop(*[f"{t}_{x}" for x in ("matched", "tail", "shift", "v", "days", "valid")])


def with_body_fields(df: DataFrame, body: str = "body", name: str = "body_fields", *,
                     strict: bool = False) -> DataFrame:
    """`df` with the struct column `name`: the fields of the report body in column `body`
    (BINARY, as the message table has it, or STRING), any documented form (with `strict`,
    [MS-MQQB]'s form only)."""
    from pyspark.sql import functions as F

    t = f"__{name}"
    df = df.withColumn(f"{t}_text", F.col(body).cast("string"))
    text = F.col(f"{t}_text")
    df = df.withColumn(f"{t}_valid", F.coalesce(text.rlike(BODY_PATTERN if strict else ANY_BODY_PATTERN),
                                                F.lit(False)))
    valid = F.col(f"{t}_valid")
    # <MESSAGE ID> is 12 characters, the id 8, then </MESSAGE ID> CR LF <TARGET QUEUE> (29);
    # the queue runs to the first </TARGET QUEUE> (then CR LF, 17, and the optional elements)
    if strict:
        queue_length = F.char_length(text) - 66
        next_hop, hop_count = F.lit(None).cast("string"), F.lit(None).cast("int")
    else:
        queue_length = F.regexp_instr(text, F.lit("(?i)</TARGET QUEUE>")) - 50
        next_hop = F.nullif(F.regexp_extract(text, _BODY_TAIL, 1), F.lit(""))
        hop_count = F.nullif(F.regexp_extract(text, _BODY_TAIL, 2), F.lit("")).try_cast("int")
    df = df.withColumn(name, F.struct(
        valid.alias("valid"),
        F.when(valid, F.conv(F.substring(text, 13, 8), 16, 10).try_cast("long")).alias("message_id"),
        F.when(valid, F.substring(text, F.lit(50), queue_length)).alias("queue"),
        F.when(valid, next_hop).alias("next_hop"),
        F.when(valid, hop_count).alias("hop_count"),
    ))
    return df.drop(f"{t}_text", f"{t}_valid")
