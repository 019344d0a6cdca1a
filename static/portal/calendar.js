// A pool's calendar: each bar's place and width come as data attributes (the content
// security policy refuses inline styles), set here through the CSSOM, which it allows.
"use strict";
document.querySelectorAll(".calendar[data-days]").forEach((calendar) => {
  calendar.style.setProperty("--days", calendar.dataset.days);
  calendar.querySelectorAll(".calendar-bar[data-left]").forEach((bar) => {
    bar.style.left = `${bar.dataset.left}%`;
    bar.style.width = `${bar.dataset.width}%`;
  });
});
