// Selecting rows of a table: a header box ticks every box of its group on this page, and
// shift-click ticks (or clears) the range from the last box clicked to this one. Boxes
// carry data-select="<group>"; the header box data-select-all="<group>". Listeners sit on
// the document so rows that live.js replaces keep working.
(function () {
  "use strict";
  var last = {};
  function boxes(group) {
    return Array.prototype.slice.call(
      document.querySelectorAll('input[type=checkbox][data-select="' + group + '"]'));
  }
  document.addEventListener("click", function (event) {
    var box = event.target;
    if (!(box instanceof HTMLInputElement) || box.type !== "checkbox") { return; }
    var all = box.getAttribute("data-select-all");
    if (all) {
      boxes(all).forEach(function (b) { b.checked = box.checked; });
      return;
    }
    var group = box.getAttribute("data-select");
    if (!group) { return; }
    var list = boxes(group);
    var from = list.indexOf(last[group]);
    var to = list.indexOf(box);
    if (event.shiftKey && from !== -1 && to !== -1) {
      var low = Math.min(from, to), high = Math.max(from, to);
      for (var i = low; i <= high; i += 1) { list[i].checked = box.checked; }
    }
    last[group] = box;
  });
})();
