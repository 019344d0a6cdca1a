// Keyboard: "/" focuses the search box in the navigation (as on GitHub or Grafana), unless
// the user is typing somewhere already; Escape leaves the box.
(function () {
  "use strict";
  var box = document.getElementById("nav-search");
  if (!box) { return; }
  function typing(target) {
    var tag = target && target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable);
  }
  document.addEventListener("keydown", function (event) {
    if (event.key === "/" && !event.ctrlKey && !event.metaKey && !event.altKey && !typing(event.target)) {
      event.preventDefault();
      box.focus();
      box.select();
    } else if (event.key === "Escape" && event.target === box) {
      box.blur();
    }
  });
})();
