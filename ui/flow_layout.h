// A layout whose items flow left to right and wrap onto the next line when the width runs out, like words: a row
// of controls that would otherwise set a minimum width for the whole window. Items keep their size hints; the
// layout's height follows its width (heightForWidth).
#pragma once

#include <QLayout>
#include <QList>

namespace ampwb::ui {

class FlowLayout : public QLayout {
 public:
  explicit FlowLayout(QWidget* parent = nullptr, int horizontal_spacing = 12, int vertical_spacing = 4);
  ~FlowLayout() override;

  void addItem(QLayoutItem* item) override;
  int count() const override { return static_cast<int>(items_.size()); }
  QLayoutItem* itemAt(int index) const override { return items_.value(index); }
  QLayoutItem* takeAt(int index) override;
  Qt::Orientations expandingDirections() const override { return {}; }
  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override { return arrange(QRect(0, 0, width, 0), false); }
  QSize minimumSize() const override;  // the widest item: the rest wraps
  QSize sizeHint() const override;     // everything on one line
  void setGeometry(const QRect& rect) override;

 private:
  int arrange(const QRect& rect, bool place) const;  // the height used
  QList<QLayoutItem*> items_;
  int horizontal_, vertical_;
};

}  // namespace ampwb::ui
