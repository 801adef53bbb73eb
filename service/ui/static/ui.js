// Refresh the parts of a page marked data-refresh="seconds" in place (the overview's live
// counts), by fetching the page again: no framework, nothing from outside this server.
"use strict";
document.querySelectorAll("[data-refresh]").forEach((el) => {
  const seconds = Number(el.dataset.refresh) || 5;
  const tick = async () => {
    if (document.hidden) return;
    try {
      const response = await fetch(location.href, { credentials: "same-origin" });
      if (!response.ok) return;
      const doc = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = el.id && doc.getElementById(el.id);
      if (fresh) el.replaceChildren(...fresh.childNodes);
    } catch (err) {
      console.warn("refresh failed", err);
    }
  };
  setInterval(tick, seconds * 1000);
});
