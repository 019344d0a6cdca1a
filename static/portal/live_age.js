// "Updated n s ago" beside every live part of a page, and "Stale" when its refresh failed
// or has not happened for three intervals (a laptop asleep, a server down); "Final" once the
// part said it is done (a move that ended) and live.js stopped refreshing it. It watches
// what live.js does (data-live-updated on success, the live-stale class on failure,
// data-live-stopped when done), so the two stay independent.
(function () {
  "use strict";
  // The time as the server writes it (Y-m-d H:i:s, in the portal's time zone, which the
  // page carries), not in the browser's locale: one way of writing dates on every page.
  var zone = document.documentElement.getAttribute("data-time-zone") || "UTC";
  function stamp(ms) {
    var parts = {};
    new Intl.DateTimeFormat("en-GB", {
      timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23"
    }).formatToParts(new Date(ms)).forEach(function (p) { parts[p.type] = p.value; });
    return parts.year + "-" + parts.month + "-" + parts.day + " " +
      parts.hour + ":" + parts.minute + ":" + parts.second;
  }
  function ago(seconds) {
    if (seconds < 60) { return seconds + " s ago"; }
    if (seconds < 3600) { return Math.floor(seconds / 60) + " min ago"; }
    return Math.floor(seconds / 3600) + " h ago";
  }
  document.querySelectorAll("[data-live-url]").forEach(function (element) {
    var interval = parseInt(element.getAttribute("data-live-seconds") || "10", 10);
    var updated = Date.now();  // the page itself was rendered just now
    var label = document.createElement("p");
    label.className = "live-age";
    label.setAttribute("data-live-age", "");
    element.parentNode.insertBefore(label, element);
    function show() {
      if (element.hasAttribute("data-live-stopped")) {
        label.textContent = "Final: updated at " + stamp(updated);
        label.classList.remove("live-age-stale");
        label.setAttribute("data-stale", "false");
        return;
      }
      var seconds = Math.max(0, Math.round((Date.now() - updated) / 1000));
      var stale = element.classList.contains("live-stale") || seconds > 3 * interval + 2;
      label.textContent = stale
        ? "Stale: last updated " + ago(seconds) + (element.classList.contains("live-stale")
          ? " (the refresh failed; retrying)" : "")
        : "Updated " + ago(seconds);
      label.classList.toggle("live-age-stale", stale);
      label.setAttribute("data-stale", stale ? "true" : "false");
    }
    new MutationObserver(function (changes) {
      changes.forEach(function (change) {
        if (change.attributeName === "data-live-updated") { updated = Date.now(); }
      });
      show();
    }).observe(element, { attributes: true, attributeFilter: ["data-live-updated", "data-live-stopped", "class"] });
    show();
    setInterval(show, 1000);
  });
})();
