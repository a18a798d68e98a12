// The review page's keys: h hallucinated, f faithful, s skip, n the note (Escape leaves it).
// Keys typed into the note are text, not shortcuts.
document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.target.closest("input, textarea, select")) {
    if (event.key === "Escape") event.target.blur();
    return;
  }
  const target = document.querySelector(`[data-key="${event.key.toLowerCase()}"]`);
  if (!target) return;
  event.preventDefault();
  if (target.matches("input, textarea")) target.focus();
  else target.click();
});
