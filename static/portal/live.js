// Live parts of a page: an element with data-live-url is fetched again every
// data-live-seconds and replaced in place, without reloading the page; one marked
// data-live-now is fetched as soon as the page is loaded too (a part too slow to hold the
// page up for: the page carries a placeholder).
(function () {
  "use strict";
  function refresh(element) {
    var url = element.getAttribute("data-live-url");
    fetch(url, { credentials: "same-origin", headers: { "X-Requested-With": "live" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        // Keep what the user ticked (nodes chosen for a move) across the refresh.
        var ticked = Array.prototype.map.call(
          element.querySelectorAll("input[type=checkbox]:checked"),
          function (box) { return box.name + "=" + box.value; });
        element.innerHTML = html;
        element.querySelectorAll("input[type=checkbox]").forEach(function (box) {
          if (ticked.indexOf(box.name + "=" + box.value) !== -1) { box.checked = true; }
        });
        element.setAttribute("data-live-updated", new Date().toISOString());
        element.classList.remove("live-stale");
        // A part that says it is done (a move that ended) is not fetched again.
        if (element.querySelector("[data-live-done]")) { stop(element); }
      })
      .catch(function () { element.classList.add("live-stale"); });
  }
  function stop(element) {
    clearInterval(element.liveTimer);
    element.setAttribute("data-live-stopped", new Date().toISOString());
  }
  document.querySelectorAll("[data-live-url]").forEach(function (element) {
    var seconds = parseInt(element.getAttribute("data-live-seconds") || "10", 10);
    element.liveTimer = setInterval(function () { refresh(element); }, seconds * 1000);
    if (element.hasAttribute("data-live-now")) { refresh(element); }
  });
  document.querySelectorAll("[data-copy-target]").forEach(function (button) {
    button.addEventListener("click", function () {
      var source = document.getElementById(button.getAttribute("data-copy-target"));
      navigator.clipboard.writeText(source.textContent).then(function () {
        button.textContent = "Copied";
        setTimeout(function () { button.textContent = "Copy"; }, 1500);
      });
    });
  });
})();
