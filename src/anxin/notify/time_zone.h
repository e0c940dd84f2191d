// Time zones for the times printed in notifications: "UTC", a fixed offset
// ("+08:00", "-05:30"), or an IANA name read from the system's zoneinfo
// files (TZif, /usr/share/zoneinfo; Debian's tzdata package).
//
//   ANXIN_ASSIGN_OR_RETURN(notify::TimeZone tz, notify::TimeZone::Load("Asia/Shanghai"));
//   std::string when = tz.Format(1764682130);   // "2025-12-02 21:28:50 CST"
//
// Named zones use the file's transitions (Debian ships them up to 2037); a
// time after the last one keeps the last offset.
//
// Thread safety: an immutable value once loaded.
#ifndef ANXIN_NOTIFY_TIME_ZONE_H_
#define ANXIN_NOTIFY_TIME_ZONE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "anxin/base/error.h"

namespace anxin::notify {

class TimeZone {
 public:
  // UTC.
  TimeZone();
  // Unknown name -> kNotFound naming the file looked for; a corrupt file ->
  // kDataLoss. zoneinfo_dir is for tests.
  static Result<TimeZone> Load(std::string_view name,
                               std::string_view zoneinfo_dir = "/usr/share/zoneinfo");
  // From the bytes of a TZif file.
  static Result<TimeZone> FromTzif(std::string_view name, std::string_view data);

  const std::string& name() const { return name_; }
  // Offset from UTC in seconds at unix time t, and the abbreviation ("CST").
  int OffsetAt(int64_t t, std::string* abbreviation = nullptr) const;
  // "YYYY-MM-DD HH:MM:SS ABBR" (ABBR is "UTC" or "+08:00" for those kinds).
  std::string Format(int64_t t) const;

 private:
  struct Type {
    int offset = 0;
    std::string abbreviation;
  };
  std::string name_ = "UTC";
  std::vector<int64_t> transitions_;      // ascending
  std::vector<uint8_t> transition_type_;  // index into types_, one per transition
  std::vector<Type> types_{Type{0, "UTC"}};
};

}  // namespace anxin::notify

#endif  // ANXIN_NOTIFY_TIME_ZONE_H_
