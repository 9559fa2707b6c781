// placeholder while the component is written
